/**
 * What `npm run bench:serve` runs on the head (setup/benchServe.js): infra/scripts/bench_serve.sh, which runs
 * bench_serve.py in the serve container's own image against the head's API. Built from the stack's `status` output
 * alone, as the status view's probe is: the key travels on the step's stdin, never here. Only light modules here.
 */
import { tlsCertHostPath } from "./node";
import { RemoteStep, base64, remoteStepCommand, scriptFile } from "./remoteStep";
import { type StatusSpec, headOf, statusTarget } from "./status";

/** The API's base URL as a client on the head reaches it (the endpoint output without /v1; the certificate names it). */
export function benchBaseUrl(spec: StatusSpec): string {
    return `${spec.tls ? "https" : "http"}://${headOf(spec).sshHost}:${spec.port}`;
}

/** Where the benchmark finds the model's tokenizer inside its container (bench_serve.sh mounts the model there). */
export const BENCH_TOKENIZER = "/model";

export function benchServeStep(spec: StatusSpec): RemoteStep {
    const head = headOf(spec);
    return {
        what: `bench:serve on node ${head.name}`,
        script: "bench_serve.sh",
        args: [
            `node=${head.name}`,
            `serve=${spec.serve}`,
            `model-path=${spec.modelPath}`,
            `cert=${spec.tls ? tlsCertHostPath(spec.stateDir, head.name) : ""}`,
            `bench=${base64(scriptFile("bench_serve.py").text)}`,
        ],
    };
}

/** The local shell command line that runs the benchmark on the head over the stack's own ssh settings. */
export function benchServeCommand(spec: StatusSpec): string {
    return remoteStepCommand(statusTarget(spec, headOf(spec)), benchServeStep(spec));
}
