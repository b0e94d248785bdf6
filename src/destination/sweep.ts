/**
 * Removal of the temporary files an interrupted run leaves behind (a process killed between creating an
 * install's temporary file and renaming it). Run only after an interrupted run (the state's journal says so),
 * since it walks the whole copy.
 *
 * @module
 */
import { opendir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isInstallTempName } from './install.js';
import { STATE_DIR_NAME } from './paths.js';

/**
 * Calls `fn` for every regular file under `root` (absolute path and file name), skipping the state directory
 * at the top and not following symbolic links. Unreadable directories are skipped. Memory: one directory
 * handle per level of depth.
 */
export async function walkLocalFiles(
  root: string,
  fn: (path: string, name: string) => void | Promise<void>,
): Promise<void> {
  async function walk(dir: string, top: boolean): Promise<void> {
    let handle: Awaited<ReturnType<typeof opendir>>;
    try {
      handle = await opendir(dir);
    } catch {
      return;
    }
    for await (const d of handle) {
      if (top && d.name === STATE_DIR_NAME) continue;
      const p = join(dir, d.name);
      if (d.isDirectory()) await walk(p, false);
      else if (d.isFile()) await fn(p, d.name);
    }
  }
  await walk(root, true);
}

/**
 * Walks `root` (not following symbolic links, skipping the state directory) and removes install temporary
 * files. Returns how many were removed. Memory: one directory handle per level of depth.
 */
export async function sweepTempFiles(root: string): Promise<number> {
  let removed = 0;
  await walkLocalFiles(root, async (path, name) => {
    if (!isInstallTempName(name)) return;
    await rm(path, { force: true });
    removed++;
  });
  return removed;
}
