// The CPU profiler commands the benchmarks' child processes accept on stdin, one JSON object a line:
//   {"cmd":"profile-start"}                       starts the V8 sampling profiler (first call connects)
//   {"cmd":"profile-stop","file":"x.cpuprofile"}  stops it and writes the profile
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

let session: Session | undefined;

/**
 * Handles `cmd` when it is a profiler command (sampling every `intervalUs` µs); returns whether it was one. The
 * caller answers it.
 */
export async function handleProfileCommand(cmd: { cmd: string; file?: string }, intervalUs = 200): Promise<boolean> {
  if (cmd.cmd === 'profile-start') {
    if (session === undefined) {
      session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
    }
    await session.post('Profiler.start');
    return true;
  }
  if (cmd.cmd === 'profile-stop' && session !== undefined) {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(cmd.file ?? 'source.cpuprofile', JSON.stringify(profile));
    return true;
  }
  return false;
}
