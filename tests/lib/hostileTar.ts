/**
 * Tar streams as a hostile source host could send them down the model chain (links, hard links, devices, absolute
 * and `..` names), made by Python's tarfile exactly as listed: the honest sender (model_ends.bash save) only ever
 * sends regular files. Used by the receiver's tests here and on the simulated hosts.
 */
import { execFileSync } from "child_process";

export type Member =
    | { name: string; type: "file"; data: string }
    | { name: string; type: "symlink" | "hardlink"; target: string }
    | { name: string; type: "dir" | "chardev" };

const MAKE = `
import io, json, sys, tarfile
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.GNU_FORMAT) as t:
    for m in json.loads(sys.argv[1]):
        i = tarfile.TarInfo(m["name"])
        i.mtime, i.mode = 1700000000, 0o644
        data = None
        if m["type"] == "file":
            data = m["data"].encode()
            i.size = len(data)
        elif m["type"] == "symlink":
            i.type, i.linkname = tarfile.SYMTYPE, m["target"]
        elif m["type"] == "hardlink":
            i.type, i.linkname = tarfile.LNKTYPE, m["target"]
        elif m["type"] == "dir":
            i.type, i.mode = tarfile.DIRTYPE, 0o755
        elif m["type"] == "chardev":
            i.type, i.devmajor, i.devminor = tarfile.CHRTYPE, 1, 3
        t.addfile(i, io.BytesIO(data) if data is not None else None)
`;

/** The tar stream of `members`, in order. */
export function hostileTar(members: Member[]): Buffer {
    return execFileSync("python3", ["-c", MAKE, JSON.stringify(members)]);
}
