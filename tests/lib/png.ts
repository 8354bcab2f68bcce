/**
 * A PNG's pixels, for tests that look at a screenshot: 8-bit RGB or RGBA, not interlaced (what Chromium writes).
 * Only what the tests need; anything else is refused by name.
 */
import { inflateSync } from "zlib";

export interface Pixels {
    width: number;
    height: number;
    /** RGBA, row by row. */
    rgba: Uint8Array;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function paeth(a: number, b: number, c: number): number {
    const p = a + b - c;
    const pa = Math.abs(p - a);
    const pb = Math.abs(p - b);
    const pc = Math.abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

export function decodePng(file: Buffer): Pixels {
    if (!file.subarray(0, 8).equals(SIGNATURE)) throw new Error("not a PNG file");
    let width = 0;
    let height = 0;
    let channels = 0;
    const idat: Buffer[] = [];
    for (let at = 8; at < file.length;) {
        const length = file.readUInt32BE(at);
        const type = file.toString("latin1", at + 4, at + 8);
        const data = file.subarray(at + 8, at + 8 + length);
        if (type === "IHDR") {
            width = data.readUInt32BE(0);
            height = data.readUInt32BE(4);
            const [depth, colour, , , interlace] = [data[8], data[9], data[10], data[11], data[12]];
            if (depth !== 8 || (colour !== 2 && colour !== 6) || interlace !== 0) {
                throw new Error(
                    `PNG of bit depth ${depth}, colour type ${colour}, interlace ${interlace}: only 8-bit RGB(A), not interlaced`,
                );
            }
            channels = colour === 6 ? 4 : 3;
        } else if (type === "IDAT") {
            idat.push(data);
        } else if (type === "IEND") {
            break;
        }
        at += 12 + length;
    }
    if (channels === 0) throw new Error("PNG without IHDR");
    const raw = inflateSync(Buffer.concat(idat));
    const stride = width * channels;
    const rows = Buffer.alloc(stride * height);
    for (let y = 0; y < height; y++) {
        const filter = raw[y * (stride + 1)];
        const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
        const out = rows.subarray(y * stride, (y + 1) * stride);
        const up = y > 0 ? rows.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
        for (let x = 0; x < stride; x++) {
            const a = x >= channels ? out[x - channels] : 0;
            const b = up[x];
            const c = x >= channels ? up[x - channels] : 0;
            const pred =
                filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : filter === 4 ? paeth(a, b, c) : NaN;
            if (Number.isNaN(pred)) throw new Error(`PNG row ${y}: unknown filter ${filter}`);
            out[x] = (line[x] + pred) & 0xff;
        }
    }
    const rgba = new Uint8Array(width * height * 4);
    for (let i = 0; i < width * height; i++) {
        rgba[i * 4] = rows[i * channels];
        rgba[i * 4 + 1] = rows[i * channels + 1];
        rgba[i * 4 + 2] = rows[i * channels + 2];
        rgba[i * 4 + 3] = channels === 4 ? rows[i * channels + 3] : 255;
    }
    return { width, height, rgba };
}

/** A rectangle of an image, in pixels: left, top, right and bottom edges (right and bottom excluded). */
export interface Box {
    x0: number;
    y0: number;
    x1: number;
    y1: number;
}

/**
 * Pixels of a strong colour (not white, grey or black: the largest and smallest channel at least `spread` apart),
 * in `box` (default: the whole image).
 */
export function colouredPixels(p: Pixels, spread = 80, box: Box = { x0: 0, y0: 0, x1: p.width, y1: p.height }): number {
    let n = 0;
    for (let y = Math.max(0, box.y0); y < Math.min(p.height, box.y1); y++) {
        for (let x = Math.max(0, box.x0); x < Math.min(p.width, box.x1); x++) {
            const i = y * p.width + x;
            const [r, g, b] = [p.rgba[i * 4], p.rgba[i * 4 + 1], p.rgba[i * 4 + 2]];
            if (Math.max(r, g, b) - Math.min(r, g, b) >= spread) n++;
        }
    }
    return n;
}
