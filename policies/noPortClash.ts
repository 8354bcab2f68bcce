import { StackValidationPolicy } from "@pulumi/policy";
import { ContainerView, LABEL, UNKNOWN, describe, label, managedContainers } from "./lib/container";

export interface NoPortClashConfig {
    /**
     * Also reject container ports below 1024. Off by default: nothing in the program needs one, but a site that
     * serves on 443 or 80 directly is legitimate. The node's SSH port is exempt (it belongs to the host's sshd).
     */
    rejectPrivilegedPorts: boolean;
}

export const noPortClashDefaults: NoPortClashConfig = { rejectPrivilegedPorts: false };

interface PortOwner {
    /** e.g. `container 'spark-1-serve' (serve, node spark-1) port 'serve'` or `the node's SSH port`. */
    what: string;
    urn?: string;
}

/** Parses the ports label: a JSON object name -> port. Returns an error text when it is not one. */
function parsePorts(raw: string): Map<string, unknown> | string {
    let parsed: unknown;
    try {
        parsed = JSON.parse(raw);
    } catch {
        return `label ${LABEL.ports} is not valid JSON: ${raw}`;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        return `label ${LABEL.ports} must be a JSON object of name to port, got ${raw}`;
    }
    return new Map(Object.entries(parsed));
}

function asPort(v: unknown): number | undefined {
    if (typeof v === "number" && Number.isInteger(v)) return v;
    if (typeof v === "string" && /^\d+$/.test(v)) return Number(v);
    return undefined;
}

export const noPortClash: StackValidationPolicy = {
    name: "no-port-clash",
    description:
        "On each node, the host ports of all project containers (vllm-cluster.ports: serve, Ray GCS/dashboard/client, " +
        "the native backend's master port) and the node's SSH port are " +
        "distinct and within 1..65535. Every container uses host networking, so two listeners on one port clash.",
    enforcementLevel: "mandatory",
    severity: "high",
    configSchema: {
        properties: {
            rejectPrivilegedPorts: { type: "boolean", default: noPortClashDefaults.rejectPrivilegedPorts },
        },
    },
    validateStack: (args, reportViolation) => {
        const cfg = { ...noPortClashDefaults, ...args.getConfig<Partial<NoPortClashConfig>>() };
        const byNode = new Map<string, Map<number, PortOwner[]>>();
        const claim = (node: string, port: number, owner: PortOwner) => {
            const ports = byNode.get(node) ?? new Map<number, PortOwner[]>();
            byNode.set(node, ports);
            const owners = ports.get(port) ?? [];
            ports.set(port, owners);
            // The SSH port label repeats on every container of a node: one sshd, one claim.
            if (owner.urn === undefined && owners.some((o) => o.urn === undefined)) return;
            owners.push(owner);
        };

        for (const { view } of managedContainers(args.resources)) {
            const node = label(view, LABEL.node);
            if (typeof node !== "string") continue;
            checkContainer(view, node, cfg, claim, reportViolation);
        }

        for (const [node, ports] of byNode) {
            for (const [port, owners] of ports) {
                if (owners.length < 2) continue;
                const blame = owners.find((o) => o.urn !== undefined);
                reportViolation(
                    `node ${node}: port ${port} is claimed more than once: ${owners.map((o) => o.what).join(" and ")}. ` +
                        "Give each listener its own port (serve.port, ray.gcsPort, ray.dashboardPort, ray.clientPort, " +
                        `native.masterPort, nodes[].sshPort) for node ${node}.`,
                    blame?.urn,
                );
            }
        }
    },
};

function checkContainer(
    view: ContainerView,
    node: string,
    cfg: NoPortClashConfig,
    claim: (node: string, port: number, owner: PortOwner) => void,
    reportViolation: (message: string, urn?: string) => void,
): void {
    const who = describe(view);
    const ssh = label(view, LABEL.sshPort);
    if (typeof ssh === "string") {
        const port = asPort(ssh);
        if (port === undefined || port < 1 || port > 65535) {
            reportViolation(`${who}: label ${LABEL.sshPort}='${ssh}' is not a port in 1..65535. Fix nodes[].sshPort.`, view.urn);
        } else {
            claim(node, port, { what: `the SSH port of node ${node}` });
        }
    }

    const raw = label(view, LABEL.ports);
    if (raw === UNKNOWN || raw === undefined) return;
    const ports = parsePorts(raw);
    if (typeof ports === "string") {
        reportViolation(`${who}: ${ports}. This label is written by the program: fix the component that sets it.`, view.urn);
        return;
    }
    for (const [name, value] of ports) {
        const port = asPort(value);
        if (port === undefined || port < 1 || port > 65535) {
            reportViolation(
                `${who}: port '${name}' = ${JSON.stringify(value)} is not a port in 1..65535. Set it to an integer in that range.`,
                view.urn,
            );
            continue;
        }
        if (cfg.rejectPrivilegedPorts && port < 1024) {
            reportViolation(
                `${who}: port '${name}' = ${port} is privileged (< 1024) and rejectPrivilegedPorts is on. ` +
                    "Choose a port of 1024 or above.",
                view.urn,
            );
        }
        claim(node, port, { what: `${who} port '${name}'`, urn: view.urn });
    }
}
