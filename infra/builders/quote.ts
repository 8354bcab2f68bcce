/** POSIX shell quoting: every command line the program builds goes through here. */

const SAFE_WORD = /^[A-Za-z0-9_\-.,:/=@%+]+$/;

/** POSIX single-quote quoting; the result is one word in sh, bash and zsh alike. */
export function shellQuote(s: string): string {
    if (s !== "" && SAFE_WORD.test(s)) {
        return s;
    }
    return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(argv: readonly string[]): string {
    return argv.map(shellQuote).join(" ");
}

/**
 * A file path as one shell word, with a leading `~/` left to the shell as "$HOME": ssh expands `~` in its own
 * options, but ssh-add and ssh-keygen -f take the path as given, so a quoted '~/.ssh/id_ed25519' names nothing.
 */
export function shellPath(p: string): string {
    return p.startsWith("~/") ? `"$HOME"/${shellQuote(p.slice(2))}` : shellQuote(p);
}
