import * as fs from "fs";
import * as path from "path";
import { OMITTED, redactRpcResponse, redactSdkDebugLog } from "../../infra/sdkLogRedaction";

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
        const m = redactRpcResponse(`RegisterResource RPC finished: resource:api-key[random]; err: null, resp: ${response}`);
        expect(m).toBe(`RegisterResource RPC finished: resource:api-key[random]; err: null, resp: ${OMITTED}`);
        const multi = redactRpcResponse(`RegisterResourceOutputs RPC finished: urn=u; err: Error: boom, resp: a\n${SECRET}\n`);
        expect(multi).not.toContain(SECRET);
        expect(multi).toContain("err: Error: boom");
        expect(redactRpcResponse("Registering resource: t=x, name=y")).toBe("Registering resource: t=x, name=y");
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
            expect(redactRpcResponse(sample)).not.toContain(SECRET);
        }
    });
});
