/**
 * VllmCluster: one vLLM inference service across several GPU hosts, reached over SSH and Docker. Every other component
 * of the package is a child of it; the stack program makes one from the stack file (infra/index.ts), and a team's own
 * program makes one from code (docs/component.md).
 */
import * as pulumi from "@pulumi/pulumi";
import { warnServeKeysForRay } from "../infra/config";
import { buildCluster } from "../infra/program";
import type { LaunchTimings } from "../infra/builders/readiness";
import type { StatusSpec } from "../infra/builders/status";
import { checkClusterArgs } from "./clusterArgs";
import { SharedHosts } from "./sharedHosts";
import type { VllmClusterArgs } from "./vllmClusterArgs";

export type { VllmClusterArgs } from "./vllmClusterArgs";

/** One host of the cluster, as the outputs list it. */
export interface ClusterNode {
    /** nodes[].name */
    name: string;
    /** head or worker */
    role: string;
    /** Where the operator reaches it (management network). */
    sshHost: string;
    /** Where the hosts reach each other (the fabric). */
    fabricIp: string;
    gpus: number;
}

const TYPE = "vllm-cluster:index:VllmCluster";

/** The clusters made in each program (by project and stack), and what each holds on its hosts (components/sharedHosts.ts). */
const made = new Map<string, SharedHosts>();

function programClusters(): SharedHosts {
    const key = `${pulumi.getProject()}/${pulumi.getStack()}`;
    const known = made.get(key) ?? new SharedHosts();
    made.set(key, known);
    return known;
}

/**
 * A vLLM OpenAI-compatible endpoint served by tensor (and pipeline) parallel ranks across the hosts in `nodes`: each
 * host's preflight, the image (and with model.source the model) copied host to host over the fabric, then either a
 * Ray head and workers with serve on the head (backend ray) or vLLM's own multi-node ranks (backend native), and a
 * readiness check that returns only once a real chat completion answers with the generated API key.
 *
 * The arguments are validated before anything is registered: a problem names its key (`serve.port: ...`), and
 * neither the cluster nor any child exists. Its children keep the names (and, through aliases, the URNs) the stack
 * program gave them before this component existed, so a stack deployed by that release upgrades in place.
 */
export class VllmCluster extends pulumi.ComponentResource {
    /** The OpenAI-compatible base URL (`http(s)://<head sshHost>:<serve.port>/v1`), known once the server answered. */
    public readonly endpoint: pulumi.Output<string>;
    /** The name clients ask for (the API's `model`). */
    public readonly servedModelName: pulumi.Output<string>;
    /** The API key (a secret), generated here and installed as a file on the head. */
    public readonly apiKey: pulumi.Output<string>;
    /** How to reach the Ray dashboard (an ssh tunnel to the head's loopback); for backend native, that there is none. */
    public readonly rayDashboard: pulumi.Output<string>;
    /** The hosts, in the order of `nodes`. */
    public readonly nodes: pulumi.Output<ClusterNode[]>;
    /** Changes exactly when a rank's container was replaced or a host joined or left. */
    public readonly clusterFingerprint: pulumi.Output<string>;
    /** model.hub: the commit downloaded; otherwise says that model.hub is not set. */
    public readonly modelCommit: pulumi.Output<string>;
    /** Where `npm run status` looks on the hosts: names, paths and ports, no secret. */
    public readonly status: pulumi.Output<StatusSpec>;
    /**
     * What the server's last start took, as the readiness wait of the `up` that started it measured: seconds from the
     * serve container's start to the first chat completion's answer, that completion's own seconds, and how long `up`
     * waited. Empty until an `up` of this release has waited for the server.
     */
    public readonly launch: pulumi.Output<LaunchTimings>;
    /**
     * The serve watchdog's last restart of the running server ("<UTC time> <what it found>"), as the last readiness
     * wait or `pulumi refresh` found it on the head; "none" without one. `pulumi up --refresh` shows it change.
     */
    public readonly watchdog: pulumi.Output<string>;
    /** With `monitoring`: how to reach Prometheus (an ssh tunnel to the head, then the URL); otherwise that none runs. */
    public readonly monitoring: pulumi.Output<string>;
    /** With `monitoring.grafana`: Grafana's admin password (a secret, generated here); otherwise that none runs. */
    public readonly grafanaAdminPassword: pulumi.Output<string>;

    constructor(name: string, args: VllmClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        // Before anything is registered: a bad argument fails naming its key, and no child (nor this) exists.
        const checked = checkClusterArgs(name, args);
        programClusters().add(name, checked.cfg);
        super(TYPE, name, {}, opts);
        const { cfg, secrets, tls, hfToken } = checked;
        warnServeKeysForRay(cfg);
        const out = buildCluster(cfg, pulumi.getStack(), secrets, tls, hfToken, this, name);

        this.endpoint = out.endpoint;
        this.servedModelName = pulumi.output(out.servedModelName);
        this.apiKey = out.apiKey;
        this.rayDashboard = pulumi.output(out.rayDashboard);
        this.nodes = pulumi.output(out.nodes);
        this.clusterFingerprint = out.clusterFingerprint;
        this.modelCommit = out.modelCommit ?? pulumi.output("none (model.hub is not set)");
        this.status = pulumi.output(out.status);
        this.launch = out.launch;
        this.watchdog = out.watchdog;
        this.monitoring = pulumi.output(out.monitoring);
        this.grafanaAdminPassword = out.grafanaAdminPassword ?? pulumi.output("none (monitoring.grafana is not set)");

        this.registerOutputs({
            endpoint: this.endpoint,
            servedModelName: this.servedModelName,
            apiKey: this.apiKey,
            rayDashboard: this.rayDashboard,
            nodes: this.nodes,
            clusterFingerprint: this.clusterFingerprint,
            modelCommit: this.modelCommit,
            status: this.status,
            launch: this.launch,
            watchdog: this.watchdog,
            monitoring: this.monitoring,
            grafanaAdminPassword: this.grafanaAdminPassword,
        });
    }
}
