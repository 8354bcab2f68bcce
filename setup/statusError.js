// @ts-check
"use strict";
/** A refusal of `npm run status` that names what is wrong (exit 2, no stack trace): its own module, so the arguments are judged before anything heavy loads. */
class StatusError extends Error {}

module.exports = { StatusError };
