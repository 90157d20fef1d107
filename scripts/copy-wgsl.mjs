// tsc does not copy assets: WGSL sources are read at run time from beside the compiled kernel modules.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function copyWgsl(srcDir, outDir) {
  for (const name of readdirSync(srcDir)) {
    const from = join(srcDir, name);
    if (statSync(from).isDirectory()) copyWgsl(from, join(outDir, name));
    else if (name.endsWith('.wgsl')) cpSync(from, join(outDir, name));
  }
}
copyWgsl('src', 'dist');
