// `credit-lens` command line (design.md#protocol): the command table (commands.ts) dispatched. User errors print one clear
// message and exit 2; nothing else prints a bare stack trace unless it is a bug (exit 1, stack in engine.log and stderr).
import { readFileSync } from 'node:fs';
import { isUserError, StoppedError, UserError } from '../core/errors';
import { COMMANDS, usage } from './commands';

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    const command = COMMANDS.find((c) => c.name === cmd);
    if (command) return await command.run(rest, usage());
    switch (cmd) {
      case '--version':
        console.log(JSON.parse(readFileSync(`${__dirname}/../../package.json`, 'utf8')).version);
        return 0;
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        console.log(usage());
        return cmd ? 0 : 2;
      default:
        throw new UserError(`unknown command "${cmd}"\n${usage()}`);
    }
  } catch (e) {
    if (isUserError(e)) {
      process.stderr.write(`error: ${e.message}\n`);
      return e instanceof StoppedError ? e.exitCode : 2;
    }
    process.stderr.write(`credit-lens internal error (a bug — please report it): ${(e as Error).stack ?? e}\n`);
    return 1;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(String(e) + '\n');
      process.exit(1);
    },
  );
}
