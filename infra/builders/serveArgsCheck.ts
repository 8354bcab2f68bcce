/** The check of a serve command by the image's own vLLM on its host (infra/scripts/serve_args_check.{sh,py}). */
import { RemoteStep, base64, remoteStepCommand, scriptFile } from "./remoteStep";
import type { SshTarget } from "./ssh";

/** The step: the host script with the Python check as one base64 argument; the serve command goes on its stdin. */
export function serveArgsCheckStep(node: string, image: string): RemoteStep {
    return {
        what: `serve arguments check on node ${node}`,
        script: "serve_args_check.sh",
        args: [`node=${node}`, `image=${image}`, `check=${base64(scriptFile("serve_args_check.py").text)}`],
    };
}

export function serveArgsCheckCommand(t: SshTarget, node: string, image: string): string {
    return remoteStepCommand(t, serveArgsCheckStep(node, image));
}
