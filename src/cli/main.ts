#!/usr/bin/env node
// The `tensorgpu` command. The flags are program.ts'; each subcommand lives in its own module.
// The Node host first: the subcommands read and write files and probe Dawn through it.
import '../runtime/node-host.js';
import { buildProgram } from './program.js';

// `tensorgpu ... | head` closes stdout early: that is the reader's choice, not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

buildProgram()
  .parseAsync()
  .catch((err: unknown) => {
    console.error(`tensorgpu: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
