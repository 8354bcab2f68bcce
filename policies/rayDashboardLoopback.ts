import { ResourceValidationPolicy } from "@pulumi/policy";
import { argv, findFlag } from "./lib/commandLine";
import { CONTAINER_TYPE, LABEL, describe, label, managedRole, viewContainer } from "./lib/container";

/** Loopback spellings Ray accepts for --dashboard-host. */
export function isLoopback(host: string): boolean {
    const h = host
        .trim()
        .toLowerCase()
        .replace(/^\[|\]$/g, "");
    return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

const FIX =
    "Bind the dashboard to 127.0.0.1 (--dashboard-host=127.0.0.1) and reach it through an SSH tunnel " +
    "(ssh -L 8265:127.0.0.1:8265 <head>); the dashboard's job API runs arbitrary code on the cluster.";

export const rayDashboardLoopback: ResourceValidationPolicy = {
    name: "ray-dashboard-loopback",
    description:
        "The Ray head's dashboard listens on loopback only (127.0.0.1, localhost or ::1), never on 0.0.0.0 or a " +
        "routable address: with host networking it would be exposed on every interface, and its job submission API " +
        "executes code without authentication.",
    enforcementLevel: "mandatory",
    severity: "critical",
    validateResource: (args, reportViolation) => {
        if (args.type !== CONTAINER_TYPE) return;
        const c = viewContainer(args.props, args.urn, args.name);
        if (managedRole(c) !== "ray-head") return;

        // Flag absent: Ray's own default is localhost, which is what we want.
        const flag = findFlag(argv(c), "--dashboard-host");
        if (flag.kind === "no-value") {
            reportViolation(`${describe(c)}: --dashboard-host has no value. ${FIX}`);
        } else if (flag.kind === "value" && !isLoopback(flag.value)) {
            reportViolation(`${describe(c)}: ray start --dashboard-host ${flag.value} exposes the Ray dashboard beyond the host. ${FIX}`);
        }

        const labelled = label(c, LABEL.dashboardHost);
        if (typeof labelled === "string" && !isLoopback(labelled)) {
            reportViolation(`${describe(c)}: label ${LABEL.dashboardHost}='${labelled}' is not a loopback address. ${FIX}`);
        }
    },
};
