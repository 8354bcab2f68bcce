import * as fs from "fs";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { OMITTED, OMITTED_MESSAGE, redactDebugMessage, redactSdkDebugLog } from "../../infra/sdkLogRedaction";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const logModule = require("@pulumi/pulumi/log") as { debug: (msg: string, ...rest: unknown[]) => Promise<void> };
const SECRET = "kX9-secret-value-in-a-response";
const response = `urn:pulumi:s::p::random:index/randomPassword:RandomPassword::api-key,result,4dabf18193072939515e22adb298388d,${SECRET}`;

describe("the SDK's debug log without engine responses", () => {
    const original = logModule.debug;
    afterEach(() => {
        logModule.debug = original;
    });

    test("a response is cut off; the call, its label and its error stay", () => {
        const m = redactDebugMessage(`RegisterResource RPC finished: resource:api-key[random]; err: null, resp: ${response}`);
        expect(m).toBe(`RegisterResource RPC finished: resource:api-key[random]; err: null, resp: ${OMITTED}`);
        const multi = redactDebugMessage(`RegisterResourceOutputs RPC finished: urn=u; err: Error: boom, resp: a\n${SECRET}\n`);
        expect(multi).not.toContain(SECRET);
        expect(multi).toContain("err: Error: boom");
        expect(redactDebugMessage("Registering resource: t=x, name=y")).toBe("Registering resource: t=x, name=y");
    });

    test("every payload kind is cut: serialized inputs (obj=, props=, outputs=) and single values", () => {
        // the invoke path's "prepared" message, as its operator-precedence slip logs it at every verbosity
        expect(redactDebugMessage(`, obj={"key":"${SECRET}"}`)).toBe(`, obj=${OMITTED}`);
        expect(redactDebugMessage(`RegisterResourceOutputs RPC prepared: urn=u, outputs={"apiKey":"${SECRET}"}`)).toBe(
            `RegisterResourceOutputs RPC prepared: urn=u, outputs=${OMITTED}`,
        );
        expect(redactDebugMessage(`Serialize property [apiKey]: primitive=${SECRET}`)).toBe(
            `Serialize property [apiKey]: primitive=${OMITTED}`,
        );
        expect(redactDebugMessage(`Invoking function: tok=t, props={"a":"${SECRET}"}`)).not.toContain(SECRET);
    });

    test("a message of a shape not seen before that carries a secret's signature is dropped whole", () => {
        const wrapped = JSON.stringify({ [pulumi.runtime.specialSigKey]: pulumi.runtime.specialSecretSig, value: SECRET });
        expect(redactDebugMessage(`Something new happened: ${wrapped}`)).toBe(OMITTED_MESSAGE);
        expect(redactDebugMessage(`Something new happened: ${response}`)).toBe(OMITTED_MESSAGE);
        expect(redactDebugMessage("Something new happened: no secret")).toBe("Something new happened: no secret");
    });

    test("the SDK runtime's debug calls go through the redaction once installed", async () => {
        const seen: string[] = [];
        logModule.debug = async (msg: string) => {
            seen.push(msg);
        };
        redactSdkDebugLog();
        redactSdkDebugLog(); // idempotent: wrapped once
        await logModule.debug(`Invoke RPC finished: tok=t; err: null, resp: ${response}`);
        await logModule.debug("Reading resource: t=a, name=b");
        expect(seen).toEqual([`Invoke RPC finished: tok=t; err: null, resp: ${OMITTED}`, "Reading resource: t=a, name=b"]);
    });

    test("every payload the installed SDK's debug calls interpolate is cut, whatever the message", () => {
        const runtime = path.join(path.dirname(require.resolve("@pulumi/pulumi/package.json")), "runtime");
        const payload = /\$\{(innerResponse|JSON\.stringify\([^}]*\)|prop|props)\}/g;
        const calls = fs
            .readdirSync(runtime)
            .filter((f) => f.endsWith(".js"))
            .flatMap((f) => fs.readFileSync(path.join(runtime, f), "utf8").match(/log\.debug\([^;]*?\);/gs) ?? [])
            .filter((c) => new RegExp(payload.source).test(c));
        expect(calls.length).toBeGreaterThanOrEqual(10);
        for (const c of calls) {
            // the message as it is logged, each payload replaced by a secret; both arms of a conditional part kept
            const sample = c
                .replace(payload, SECRET)
                .replace(/\(settings_1\.excessiveDebugOutput \? `([^`]*)` : ``\)/g, "$1")
                .replace(/[`+()\n]|log\.debug|settings_1\.excessiveDebugOutput \?|: ``;?/g, "");
            expect([c, sample.includes(SECRET)]).toEqual([c, true]);
            expect([c, redactDebugMessage(sample).includes(SECRET)]).toEqual([c, false]);
        }
    });

    test("every response the installed SDK logs has the shape the redaction cuts", () => {
        const runtime = path.join(path.dirname(require.resolve("@pulumi/pulumi/package.json")), "runtime");
        const calls = fs
            .readdirSync(runtime)
            .filter((f) => f.endsWith(".js"))
            .flatMap(
                (f) =>
                    fs.readFileSync(path.join(runtime, f), "utf8").match(/log\.debug\(`[^`]*RPC finished[^`]*`(\s*\+\s*`[^`]*`)*/g) ?? [],
            );
        expect(calls.length).toBeGreaterThanOrEqual(5);
        for (const c of calls) {
            const sample = c
                .replace(/^log\.debug\(/, "")
                .replace(/`\s*\+\s*`/g, "")
                .replace(/`/g, "")
                .replace(/\$\{innerResponse\}/, SECRET);
            expect(sample).toContain(SECRET);
            expect(redactDebugMessage(sample)).not.toContain(SECRET);
        }
    });
});
