import type * as docker from "@pulumi/docker";

/**
 * Translates the program's docker.ContainerArgs (as the container builders return them from plain values) into
 * a `docker run` argv, so the direct driver starts exactly the containers the docker provider would create.
 *
 * Every field the builders set is mapped; any other field that is set is an error, so nothing is dropped
 * silently. `docker run --entrypoint` takes one word only: the remaining entrypoint elements go in front of the
 * command, which gives the container's first process the same argv (Path + Args) the provider's
 * Entrypoint + Cmd would. `mustRun`/`wait` are the driver's job (it checks the container is running).
 */
export function dockerRunArgv(args: docker.ContainerArgs): string[] {
    const a = args as unknown as Record<string, unknown>;
    const handled = new Set([
        "name",
        "image",
        "networkMode",
        "ipcMode",
        "shmSize",
        "entrypoints",
        "command",
        "envs",
        "labels",
        "volumes",
        "gpus",
        "restart",
        "maxRetryCount",
        "mustRun",
        "wait",
        "destroyGraceSeconds",
    ]);
    const unknown = Object.keys(a).filter((k) => a[k] !== undefined && !handled.has(k));
    if (unknown.length > 0) {
        throw new Error(`dockerRunArgv: unsupported container args: ${unknown.sort().join(", ")}`);
    }

    const name = str(a, "name");
    const image = str(a, "image");
    const argv = ["docker", "run", "--detach", "--name", name];

    const networkMode = optStr(a, "networkMode");
    if (networkMode !== undefined) {
        argv.push(`--network=${networkMode}`);
    }
    const ipcMode = optStr(a, "ipcMode");
    if (ipcMode !== undefined) {
        argv.push(`--ipc=${ipcMode}`);
    }
    const shm = optNum(a, "shmSize");
    if (shm !== undefined) {
        argv.push(`--shm-size=${shm}m`); // the provider's shmSize is in MB
    }
    const gpus = optStr(a, "gpus");
    if (gpus !== undefined) {
        argv.push(`--gpus=${gpus}`);
    }
    const restart = optStr(a, "restart");
    if (restart !== undefined) {
        const retries = optNum(a, "maxRetryCount");
        argv.push(`--restart=${restart === "on-failure" && retries !== undefined ? `on-failure:${retries}` : restart}`);
    }
    const grace = optNum(a, "destroyGraceSeconds");
    if (grace !== undefined) {
        argv.push(`--stop-timeout=${grace}`);
    }
    for (const e of strList(a, "envs")) {
        argv.push("--env", e);
    }
    for (const l of plainList<{ label: unknown; value: unknown }>(a, "labels")) {
        argv.push("--label", `${plain(l.label, "labels[].label")}=${plain(l.value, "labels[].value")}`);
    }
    for (const v of plainList<{ hostPath?: unknown; containerPath?: unknown; readOnly?: unknown }>(a, "volumes")) {
        const host = plain(v.hostPath, "volumes[].hostPath");
        const ctr = plain(v.containerPath, "volumes[].containerPath");
        if (typeof host !== "string" || typeof ctr !== "string") {
            throw new Error("dockerRunArgv: volumes need hostPath and containerPath");
        }
        argv.push("--volume", `${host}:${ctr}${plain(v.readOnly, "volumes[].readOnly") === true ? ":ro" : ""}`);
    }

    const entrypoints = strList(a, "entrypoints");
    const command = strList(a, "command");
    if (entrypoints.length > 0) {
        argv.push(`--entrypoint=${entrypoints[0]}`);
    }
    argv.push(image, ...entrypoints.slice(1), ...command);
    return argv;
}

function plain(v: unknown, what: string): unknown {
    if (
        v instanceof Promise ||
        (typeof v === "object" && v !== null && "apply" in v && typeof (v as { apply: unknown }).apply === "function")
    ) {
        throw new Error(`dockerRunArgv: ${what} is not a resolved value (Output or Promise)`);
    }
    return v;
}

function str(a: Record<string, unknown>, k: string): string {
    const v = plain(a[k], k);
    if (typeof v !== "string" || v === "") {
        throw new Error(`dockerRunArgv: ${k} must be a non-empty string`);
    }
    return v;
}

function optStr(a: Record<string, unknown>, k: string): string | undefined {
    return a[k] === undefined ? undefined : str(a, k);
}

function optNum(a: Record<string, unknown>, k: string): number | undefined {
    const v = plain(a[k], k);
    if (v === undefined) {
        return undefined;
    }
    if (typeof v !== "number" || !Number.isFinite(v)) {
        throw new Error(`dockerRunArgv: ${k} must be a number`);
    }
    return v;
}

function plainList<T>(a: Record<string, unknown>, k: string): T[] {
    const v = plain(a[k], k);
    if (v === undefined) {
        return [];
    }
    if (!Array.isArray(v)) {
        throw new Error(`dockerRunArgv: ${k} must be a list`);
    }
    return v.map((x, i) => plain(x, `${k}[${i}]`) as T);
}

function strList(a: Record<string, unknown>, k: string): string[] {
    return plainList<unknown>(a, k).map((x, i) => {
        if (typeof x !== "string") {
            throw new Error(`dockerRunArgv: ${k}[${i}] must be a string`);
        }
        return x;
    });
}
