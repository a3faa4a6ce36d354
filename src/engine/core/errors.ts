// A UserError is a mistake the user can fix (bad config, missing file, throwing reward module).
// The CLI prints its message without a stack trace and exits non-zero; anything else is a bug.
export class UserError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'UserError';
  }
}

export function isUserError(e: unknown): e is UserError {
  return e instanceof Error && e.name === 'UserError';
}

/**
 * A long command stopped by its user (Ctrl-C, SIGTERM, the extension's Cancel) before it finished: what it finished is
 * kept, and the CLI exits 130, as a stopped run does, so a caller can tell a stop from a failure.
 */
export class StoppedError extends UserError {
  readonly exitCode = 130;
}
