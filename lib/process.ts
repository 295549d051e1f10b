/**
 * Is a process with this pid alive on this host? EPERM means it exists but belongs to
 * another user (an engine run as another user is alive, and its lock is not stale).
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
