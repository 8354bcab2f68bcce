/**
 * Keeps secret values out of the engine's event stream.
 *
 * The Node SDK logs every engine response it gets (RegisterResource, RegisterResourceOutputs, ReadResource, Invoke,
 * Call: "... RPC finished: ...; err: ..., resp: ...") at debug level, whatever the verbosity, and a response carries
 * the resource's outputs with secret values in plain text (inside their secret wrapper). The engine passes debug
 * messages on as events: the Automation API's event stream, `--event-log` files (the timelines), `pulumi up --debug`
 * and anything a pipeline keeps of them would hold the API key and the Ray token. Seen with SDK 3.248 to 3.276.
 *
 * The invoke and call paths also log the serialized arguments (`obj=`) at every verbosity. No SDK release up to 3.276
 * (the newest on the registry on 2026-12-02) stops this, so the program keeps those messages (they say which call
 * finished and whether it failed) without any payload, and fails if the SDK stops taking the wrapper.
 */
import * as pulumi from "@pulumi/pulumi";

export const OMITTED = "[omitted: engine responses hold secret values in plain text]";

/** What stands for a whole message that still held a secret's wrapper after the payloads were cut. */
export const OMITTED_MESSAGE = "[omitted: a debug message of the Pulumi SDK held a secret value]";

/**
 * Where a debug message's payload starts, for every kind the SDK logs: an engine response (`resp: `), serialized
 * inputs (`obj=`, `props=`, `outputs=`: the invoke path logs `obj=` at every verbosity through an operator-precedence
 * slip) and single serialized values (`primitive=`, `function=`). What precedes it names the call; what follows is
 * cut.
 */
const PAYLOAD = /(\bresp: |\bobj=|\bprops=|\boutputs=|\bprimitive=|\bfunction=)[\s\S]*$/;

/** The markers of a secret value however it is serialized: Pulumi's secret signature key and value. */
const SECRET_MARKS = [pulumi.runtime.specialSigKey, pulumi.runtime.specialSecretSig];

/**
 * A debug message without its payload; a message that still carries a secret's signature anywhere (a shape not
 * seen before) is replaced whole. Other messages are unchanged.
 */
export function redactDebugMessage(message: string): string {
    const cut = message.replace(PAYLOAD, (_, marker: string) => `${marker}${OMITTED}`);
    return SECRET_MARKS.some((m) => cut.includes(m)) ? OMITTED_MESSAGE : cut;
}

type Debug = typeof pulumi.log.debug;
let installed: Debug | undefined;

/**
 * Wraps the SDK's `log.debug`, the function its runtime calls through the same module object, so every later debug
 * message passes `redactDebugMessage`. Idempotent; throws if the SDK's module no longer takes the wrapper (a change in
 * a newer SDK must not silently undo this).
 */
export function redactSdkDebugLog(): void {
    const logModule = pulumi.log as { debug: Debug };
    if (installed && logModule.debug === installed) {
        return;
    }
    const original = logModule.debug;
    const wrapped: Debug = (msg, resource, streamId, ephemeral) => original(redactDebugMessage(msg), resource, streamId, ephemeral);
    logModule.debug = wrapped;
    // the runtime's own import of the log module must see the wrapper, not a copy
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    if ((require("@pulumi/pulumi/log") as { debug: Debug }).debug !== wrapped) {
        throw new Error("cannot redact the Pulumi SDK's debug log: its log module did not take the wrapper");
    }
    installed = wrapped;
}
