/**
 * Keeps secret values out of the engine's event stream.
 *
 * The Node SDK logs every engine response it gets (RegisterResource, RegisterResourceOutputs, ReadResource, Invoke,
 * Call: "... RPC finished: ...; err: ..., resp: ...") at debug level, whatever the verbosity, and a response carries
 * the resource's outputs with secret values in plain text (inside their secret wrapper). The engine passes debug
 * messages on as events: the Automation API's event stream, `--event-log` files (the timelines), `pulumi up --debug`
 * and anything a pipeline keeps of them would hold the API key and the Ray token. Seen with SDK 3.248 to 3.276.
 *
 * The program keeps those messages (they say which call finished and whether it failed) without the response.
 */
import * as pulumi from "@pulumi/pulumi";

export const OMITTED = "[omitted: engine responses hold secret values in plain text]";

const RPC_RESPONSE = /^(.*\bRPC finished\b[\s\S]*?), resp: [\s\S]*$/;

/** A debug message with any engine response cut off; other messages unchanged. */
export function redactRpcResponse(message: string): string {
    const m = RPC_RESPONSE.exec(message);
    return m ? `${m[1]}, resp: ${OMITTED}` : message;
}

type Debug = typeof pulumi.log.debug;
let installed: Debug | undefined;

/**
 * Wraps the SDK's `log.debug`, the function its runtime calls through the same module object, so every later debug
 * message passes `redactRpcResponse`. Idempotent; throws if the SDK's module no longer takes the wrapper (a change in
 * a newer SDK must not silently undo this).
 */
export function redactSdkDebugLog(): void {
    const logModule = pulumi.log as { debug: Debug };
    if (installed && logModule.debug === installed) {
        return;
    }
    const original = logModule.debug;
    const wrapped: Debug = (msg, resource, streamId, ephemeral) => original(redactRpcResponse(msg), resource, streamId, ephemeral);
    logModule.debug = wrapped;
    // the runtime's own import of the log module must see the wrapper, not a copy
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    if ((require("@pulumi/pulumi/log") as { debug: Debug }).debug !== wrapped) {
        throw new Error("cannot redact the Pulumi SDK's debug log: its log module did not take the wrapper");
    }
    installed = wrapped;
}
