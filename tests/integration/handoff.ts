/**
 * One deployed `local` stack for two test files. Under `npm test` (which sets VCL_HANDOFF to a file path), the
 * integration suite's backend-ray file (cluster.test.ts) ends with its cluster serving and hands it over instead
 * of destroying it; the fault suite (tests/faults) adopts it instead of a cold up of its own, and its last test
 * destroys it and checks that nothing is left. Without VCL_HANDOFF each file brings up and destroys its own.
 */
import * as fs from "fs";
import * as path from "path";
import { apiKeyHostPath } from "../../infra/builders/node";
import { Project, openStack, stateResources, transcript } from "./engine";
import { Hosts } from "./hosts";

export const HANDOFF = process.env.VCL_HANDOFF;

interface Handed {
    dir: string;
    stackName: string;
    from: string;
}

/** Hands `p` over (its project copy, state and what this file's engine runs printed); `from` names the giver. */
export function handOver(p: Project, from: string): void {
    if (!HANDOFF) throw new Error("handOver: VCL_HANDOFF is not set");
    fs.writeFileSync(path.join(p.dir, ".transcript.json"), JSON.stringify(transcript), { mode: 0o600 });
    const h: Handed = { dir: p.dir, stackName: p.stackName, from };
    fs.writeFileSync(HANDOFF, JSON.stringify(h) + "\n", { mode: 0o600 });
}

/**
 * The stack handed over, opened, with the giver's transcript; undefined when none was (VCL_HANDOFF unset, or the
 * giver did not finish). Taken once: the handoff file is removed, so a second run starts its own.
 */
export async function adopt(stackName: string): Promise<{ p: Project; from: string; transcript: string[] } | undefined> {
    if (!HANDOFF || !fs.existsSync(HANDOFF)) return undefined;
    const h = JSON.parse(fs.readFileSync(HANDOFF, "utf8")) as Handed;
    fs.rmSync(HANDOFF);
    if (h.stackName !== stackName) throw new Error(`${HANDOFF} hands over stack ${h.stackName}, not ${stackName}`);
    const given = JSON.parse(fs.readFileSync(path.join(h.dir, ".transcript.json"), "utf8")) as string[];
    return { p: await openStack(h.dir, h.stackName), from: h.from, transcript: given };
}

/** After a destroy: no container of the stack on any of `nodes`, no key file on `head`, an empty state. */
export async function expectNothingLeft(p: Project, hosts: Hosts, nodes: string[], head: string): Promise<void> {
    for (const n of nodes) {
        expect(await hosts.projectContainers(n, p.stackName)).toEqual([]);
    }
    expect((await hosts.on(head, ["test", "-e", apiKeyHostPath(hosts.cfg.stateDir, head)])).code).toBe(1);
    expect(await stateResources(p)).toEqual([]);
}
