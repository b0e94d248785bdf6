/**
 * Renames the files of a copy to the names the path mapping gives them now, crash-safely: used once on a copy
 * made by a version that named files differently (escaped `%XX` names, see docs/file-names.md), before its
 * first run with this version.
 *
 * Three phases, recorded in the state so that a run killed at any moment is finished by the next one:
 * 1. collect: every record whose path differs from the mapping's is listed in the state (`renames`);
 * 2. move: each listed file goes to `.resourcesync/renaming/<n>` (two records may swap names, so no file is
 *    put at its new name before every old name is free);
 * 3. place: each file goes to its new name, and its record takes the new path in the same transaction that
 *    drops it from the list.
 * Each step checks what is on disk first, so repeating it after a crash does no harm. Memory: one page of
 * records (the list is in the state).
 *
 * @module
 */
import { lstat, mkdir, readdir, rename, rmdir } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { syncDir } from '../io/atomic.js';
import { syncFileSystem } from '../io/syncfs.js';
import { STATE_DIR_NAME, type PathMapper, ensureParentDirectory, forgetVerifiedDirectories } from './paths.js';
import type { DestinationState } from './state.js';

/** Meta key of the phase in progress. */
const PHASE_KEY = 'renaming';
/** Directory under the state directory holding the files between their two names. */
const RENAMING_DIR = 'renaming';

/** Options of {@link renameCopyFiles}. */
export interface RenameCopyOptions {
  /** Called with each problem (a file that cannot be moved stays under its old name). */
  readonly warn?: (message: string) => void;
  /** Called after each step (`phase`, sequence number): a test throws from it to simulate a crash there. */
  readonly afterStep?: (phase: 'collect' | 'move' | 'place', seq: number) => void;
}

/** What {@link renameCopyFiles} did. */
export interface RenameCopyResult {
  /** Files moved to their new names. */
  readonly renamed: number;
  /** Files that could not be moved (they keep their old names and records). */
  readonly failed: number;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * Brings the files of the copy at `root` to the names `mapper` gives their URIs (see the module documentation).
 * Records without a path (deletions of resources never fetched) are left alone. Resumes an interrupted run.
 */
export async function renameCopyFiles(
  state: DestinationState,
  mapper: PathMapper,
  root: string,
  options: RenameCopyOptions = {},
): Promise<RenameCopyResult> {
  const tmpDir = join(root, STATE_DIR_NAME, RENAMING_DIR);
  const rel = (abs: string): string => relative(root, abs).split(sep).join('/');
  const abs = (relPath: string): string => join(root, ...relPath.split('/'));
  let phase = state.getMeta(PHASE_KEY);

  if (phase !== 'move' && phase !== 'place') {
    // Collect (again, from the start, after a crash during the collection).
    state.transaction(() => {
      for (const r of state.renames()) state.finishRename(r.seq, false);
    });
    const batch: { uri: string; from: string; to: string }[] = [];
    const flush = (): void => {
      state.addRenames(batch);
      batch.length = 0;
    };
    for (const rec of state.all()) {
      if (rec.path === '') continue;
      let to: string;
      try {
        to = rel(mapper.toLocalPath(rec.uri));
      } catch {
        continue; // refused now: its file stays, reported by audits as extra
      }
      if (to === rec.path) continue;
      batch.push({ uri: rec.uri, from: rec.path, to });
      if (batch.length >= 1000) flush();
    }
    flush();
    options.afterStep?.('collect', 0);
    await mkdir(tmpDir, { recursive: true });
    state.setMeta(PHASE_KEY, 'move', { durable: true });
    phase = 'move';
  }

  if (phase === 'move') {
    for (const r of state.renames()) {
      const tmp = join(tmpDir, String(r.seq));
      if (!(await isFile(tmp)) && (await isFile(abs(r.from)))) await rename(abs(r.from), tmp);
      options.afterStep?.('move', r.seq);
    }
    // The moves are on disk before the phase says so: a later `move` would take a placed file for an old one.
    if (!(await syncFileSystem(root))) {
      const dirs = new Set<string>([tmpDir]);
      for (const r of state.renames()) dirs.add(dirname(abs(r.from)));
      for (const d of dirs) await syncDir(d);
    }
    state.setMeta(PHASE_KEY, 'place', { durable: true });
  }

  let renamed = 0;
  let failed = 0;
  const oldDirs = new Set<string>();
  forgetVerifiedDirectories(root);
  const placed: number[] = [];
  for (const r of state.renames()) {
    const tmp = join(tmpDir, String(r.seq));
    oldDirs.add(dirname(abs(r.from)));
    if (await isFile(tmp)) {
      const to = abs(r.to);
      try {
        await ensureParentDirectory(root, to);
        await rename(tmp, to);
        renamed++;
      } catch (e) {
        // Back under the old name (whose directory may be gone), its record unchanged.
        failed++;
        options.warn?.(`cannot rename ${r.from} to ${r.to}: ${(e as Error).message}; kept as it was`);
        await mkdir(dirname(abs(r.from)), { recursive: true }).catch(() => undefined);
        await rename(tmp, abs(r.from)).catch(() => undefined);
        state.finishRename(r.seq, false);
        continue;
      }
    }
    placed.push(r.seq);
    options.afterStep?.('place', r.seq);
  }
  // The new names are durable before the records name them.
  if (placed.length > 0 && !(await syncFileSystem(root))) {
    const dirs = new Set<string>();
    for (const r of state.renames()) dirs.add(dirname(abs(r.to)));
    for (const d of dirs) await syncDir(d);
  }
  state.transaction(() => {
    for (const seq of placed) state.finishRename(seq, true);
    state.setMeta(PHASE_KEY, 'done');
  });
  // Directories the old names left empty.
  for (const d of [...oldDirs].sort((a, b) => b.length - a.length)) await removeEmptyDirs(root, d);
  return { renamed, failed };
}

/** Removes `dir` and its parents up to (not including) `root` while they are empty. */
async function removeEmptyDirs(root: string, dir: string): Promise<void> {
  let d = dir;
  while (d.startsWith(root + sep) && d !== root) {
    try {
      if ((await readdir(d)).length > 0) return;
      await rmdir(d);
    } catch {
      return;
    }
    d = dirname(d);
  }
}

/** True when a rename of the copy's files is under way or needed (a copy made by an older version). */
export function needsRename(state: DestinationState): boolean {
  const phase = state.getMeta(PHASE_KEY);
  return (phase !== undefined && phase !== 'done') || state.nameOptions()?.version === 1;
}
