/**
 * `tests/testbed/testbed cpu`: the check that runs before the demo or the suite downloads anything. It reads the
 * CPU's flags, so the answers for CPUs this machine does not have are shown with cpuinfo files standing in for
 * /proc/cpuinfo (VCL_TESTBED_CPUINFO) and another architecture (VCL_TESTBED_ARCH). No root, no hosts.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");
const BASE = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx";

/** Flags as a machine of each kind reports them (trimmed to what matters and some neighbours). */
const CPUS = {
    sapphireRapids: {
        model: "Intel(R) Xeon(R) Platinum 8480+",
        flags: `${BASE} avx f16c fma avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni amx_tile amx_bf16`,
    },
    skylake: { model: "Intel(R) Xeon(R) Gold 6148", flags: `${BASE} avx f16c fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl` },
    epycMilan: { model: "AMD EPYC 7763 64-Core Processor", flags: `${BASE} avx f16c fma avx2 bmi2 sha_ni vaes` },
    sandyBridge: { model: "Intel(R) Xeon(R) CPU E5-2670 0", flags: `${BASE} avx sse4_2 popcnt aes` },
};

let tmp: string;
beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "testbed-cpu-"));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function cpuCheck(cpu: { model: string; flags: string }, arch = "x86_64") {
    const info = path.join(tmp, `${cpu.model.replace(/\W+/g, "_")}.cpuinfo`);
    // two processors, as /proc/cpuinfo lists every core
    const block = `processor\t: 0\nvendor_id\t: x\nmodel name\t: ${cpu.model}\nflags\t\t: ${cpu.flags}\n\n`;
    fs.writeFileSync(info, block + block.replace("processor\t: 0", "processor\t: 1"));
    const r = spawnSync("bash", ["tests/testbed/testbed", "cpu"], {
        cwd: ROOT,
        encoding: "utf8",
        env: { ...process.env, VCL_TESTBED_CPUINFO: info, VCL_TESTBED_ARCH: arch },
        timeout: 30_000,
    });
    return { status: r.status, out: r.stdout.trim(), err: r.stderr };
}

describe("testbed cpu: can this CPU run the test image, and which kernel library will vLLM load", () => {
    test("AVX-512 with BF16 (Sapphire Rapids): _C", () => {
        const r = cpuCheck(CPUS.sapphireRapids);
        expect(r.status).toBe(0);
        expect(r.out).toContain("Intel(R) Xeon(R) Platinum 8480+");
        expect(r.out).toContain("vLLM will load its _C kernels");
    });

    test("AVX-512 without BF16 (Skylake): _C_AVX512", () => {
        const r = cpuCheck(CPUS.skylake);
        expect(r.status).toBe(0);
        expect(r.out).toContain("vLLM will load its _C_AVX512 kernels");
    });

    test("AVX2 without AVX-512 (AMD EPYC Milan, the newcomer's machine): _C_AVX2", () => {
        const r = cpuCheck(CPUS.epycMilan);
        expect(r.status).toBe(0);
        expect(r.out).toContain("AMD EPYC 7763");
        expect(r.out).toContain("x86-64 with avx avx2 fma f16c;");
        expect(r.out).toContain("vLLM will load its _C_AVX2 kernels");
    });

    test("no AVX2 (Sandy Bridge): refused, naming what it has and what is missing", () => {
        const r = cpuCheck(CPUS.sandyBridge);
        expect(r.status).toBe(1);
        expect(r.out).toBe(
            "the test image needs AVX2, FMA and F16C (vLLM's _C_AVX2 kernels, the least its CPU build runs); this CPU " +
                "(Intel(R) Xeon(R) CPU E5-2670 0) has: avx; missing: avx2 fma f16c",
        );
    });

    test("not x86-64: refused, naming the architecture", () => {
        const r = cpuCheck(CPUS.sapphireRapids, "aarch64");
        expect(r.status).toBe(1);
        expect(r.out).toContain("needs an x86-64 CPU");
        expect(r.out).toContain("this machine is aarch64");
    });

    test("this machine's own CPU gets an answer (whichever it is)", () => {
        const r = spawnSync("bash", ["tests/testbed/testbed", "cpu"], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
        expect(r.stdout).toMatch(/vLLM will load its _C(_AVX2|_AVX512)? kernels|needs/);
    });
});

describe("the image build's failure message", () => {
    test("exit 132 is named as SIGILL with the CPU's flags and the end of the build's own log", () => {
        const log = path.join(tmp, "build.log");
        fs.writeFileSync(log, [...Array.from({ length: 20 }, (_, i) => `line ${i}`), "Illegal instruction"].join("\n") + "\n");
        const info = path.join(tmp, "milan.cpuinfo");
        fs.writeFileSync(info, `model name\t: ${CPUS.epycMilan.model}\nflags\t\t: ${CPUS.epycMilan.flags}\n`);
        // build_failure is a function of the script: source it without running main
        const r = spawnSync(
            "bash",
            ["-c", `source <(sed '/^main "\\$@"$/d' tests/testbed/testbed) && build_failure 132 ${JSON.stringify(log)}`],
            { cwd: ROOT, encoding: "utf8", env: { ...process.env, VCL_TESTBED_CPUINFO: info, VCL_TESTBED_ARCH: "x86_64" } },
        );
        expect(r.status).toBe(0);
        expect(r.stdout).toContain("exit 132: a process was killed by SIGILL (illegal instruction)");
        expect(r.stdout).toContain("AMD EPYC 7763");
        expect(r.stdout).toContain(`last lines of its log (${log}):`);
        expect(r.stdout).toContain("line 19\nIllegal instruction");
        expect(r.stdout).not.toContain("line 5\n");
    });
});
