/** model.hub's commands: the Hub API address the operator asks, and the download on the source host. */
import * as fs from "fs";
import * as path from "path";
import { shellJoin } from "./quote";
import { SshTarget, sshCommand } from "./ssh";

/** The Hub's own address, when neither model.hub.endpoint nor the operator's HF_ENDPOINT names another. */
export const HUB_DEFAULT_ENDPOINT = "https://huggingface.co";

/** The download container's name on the source host (one download at a time; a leftover one is removed first). */
export const HUB_DOWNLOAD_CONTAINER = "vllm-cluster-hub-download";

export function hubEndpoint(configured: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
    return (configured ?? env.HF_ENDPOINT ?? HUB_DEFAULT_ENDPOINT).replace(/\/+$/, "");
}

/** The Hub API's answer for one revision of a model repo: its commit (`sha`) and files. */
export function hubRevisionUrl(endpoint: string, repo: string, revision: string): string {
    return `${endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}`;
}

/** infra/scripts/hub_download.py, read when the program runs. */
export function hubDownloadScript(): string {
    return fs.readFileSync(path.join(__dirname, "..", "scripts", "hub_download.py"), "utf8");
}

export interface HubDownload {
    target: SshTarget;
    repo: string;
    commit?: string;
    endpoint: string;
    hostPath: string;
    image: string;
    script: string;
}

/**
 * The download on the source host: the model directory made by the login user, then the script in the cluster's
 * image as that user (files owned by it), with the directory at the same path, the host's network, and stdin (the
 * token) attached. Neither the token nor anything derived from it is in argv or the container's environment.
 */
export function hubDownloadCommand(d: HubDownload): string {
    const run = [
        "docker",
        "run",
        "--rm",
        "-i",
        "--name",
        HUB_DOWNLOAD_CONTAINER,
        "--network",
        "host",
        "--label",
        "vllm-cluster.hub-download=true",
        "-e",
        "HOME=/tmp",
        // online for this one run, whatever the image sets (vLLM images often set HF_HUB_OFFLINE=1 for serving)
        "-e",
        "HF_HUB_OFFLINE=0",
        "-e",
        `HF_ENDPOINT=${d.endpoint}`,
        "-e",
        "HF_HUB_DISABLE_TELEMETRY=1",
        "-v",
        `${d.hostPath}:${d.hostPath}`,
        "--entrypoint",
        "python3",
        d.image,
        "-c",
        d.script,
        d.repo,
        d.commit ?? "",
        d.hostPath,
    ];
    const remote = [
        `mkdir -p ${shellJoin([d.hostPath])}`,
        `docker rm -f ${HUB_DOWNLOAD_CONTAINER} >/dev/null 2>&1`,
        // the user is the login user's, found on the host
        `exec ${shellJoin(run.slice(0, 4))} --user "$(id -u):$(id -g)" ${shellJoin(run.slice(4))}`,
    ].join("; ");
    return sshCommand(d.target, ["sh", "-c", remote], false);
}
