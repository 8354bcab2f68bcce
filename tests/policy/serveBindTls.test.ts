import { serveBindTls } from "../../policies/serveBindTls";
import { UNKNOWN, nativeRank, rayHead, runResourcePolicy, serve, withFlag, withProps } from "./util";

type Props = ReturnType<typeof serve>;
const messages = async (props: Props) => (await runResourcePolicy(serveBindTls, { name: "spark-1-serve", props })).map((v) => v.message);
/** The compliant serve container without its TLS flags (and their values). */
function plain(p: Props = serve()): Props {
    const command = p.command!.filter((w, i, all) => !/^--ssl-/.test(w) && !/^--ssl-/.test(all[i - 1] ?? ""));
    return withProps(p, { command });
}
const bound = (host: string, p: Props = plain()) => withFlag(p, "--host", host);

describe("serve-bind-needs-tls", () => {
    it("is mandatory", () => {
        expect(serveBindTls.enforcementLevel).toBe("mandatory");
    });

    it("accepts HTTPS on every interface", async () => {
        expect(await messages(serve())).toEqual([]);
    });

    it("reports plain HTTP on every interface, on a management address, or with no --host at all", async () => {
        expect(await messages(plain())).toEqual([
            "container 'spark-1-serve' (serve, node spark-1): the API listens on every interface (0.0.0.0) over plain HTTP, " +
                "so every request's bearer key crosses the network in clear. Set serve.tls (the certificate and key, as files or as secret config), or bind " +
                "serve.host to 127.0.0.1 (reach it through an ssh tunnel) or the head's fabric IP.",
        ]);
        expect(await messages(bound("10.1.230.180"))).toEqual([expect.stringContaining("listens on 10.1.230.180 over plain HTTP")]);
        const noHost = plain();
        const at = noHost.command!.indexOf("--host");
        noHost.command!.splice(at, 2);
        expect(await messages(noHost)).toEqual([expect.stringContaining("listens on every interface over plain HTTP")]);
    });

    it("reports half a TLS setup (a certificate without its key)", async () => {
        const p = plain();
        p.command!.push("--ssl-certfile", "/run/vllm-cluster/tls-cert.pem");
        expect(await messages(p)).toEqual([expect.stringContaining("over plain HTTP")]);
    });

    it("reads vLLM's spellings of --host (an abbreviation, _ for -, =value)", async () => {
        const p = plain();
        p.command!.push("--ho=10.1.230.180");
        expect(await messages(p)).toEqual([expect.stringContaining("listens on 10.1.230.180")]);
    });

    it("accepts plain HTTP on loopback or on the head's own fabric IP, not on another fabric address", async () => {
        expect(await messages(bound("127.0.0.1"))).toEqual([]);
        expect(await messages(bound("192.168.200.12"))).toEqual([]);
        expect(await messages(bound("192.168.200.13"))).toEqual([expect.stringContaining("listens on 192.168.200.13")]);
    });

    it("leaves headless native ranks, Ray containers and values not known yet alone", async () => {
        expect(await messages(plain(nativeRank(1)))).toEqual([]);
        expect(await messages(plain(nativeRank(0)))).toEqual([expect.stringContaining("over plain HTTP")]);
        expect(await messages(rayHead())).toEqual([]);
        const unknown = plain();
        unknown.command![unknown.command!.indexOf("--host") + 1] = UNKNOWN as unknown as string;
        expect(await messages(unknown)).toEqual([]);
    });
});
