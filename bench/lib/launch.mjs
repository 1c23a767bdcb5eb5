/**
 * One process started through `start(callbacks)` (a Launcher's `launch` or `launchTty`), timed: until its first
 * output (`first`, 0 if it printed nothing), until it has ended, exited and its output closed (`total`), and how
 * long the start held the event loop (`sync`). Runs one at a time, so that runs do not overlap.
 */
export async function timedLaunch(start) {
  let sync = 0;
  let first = 0;
  const t0 = performance.now();
  await new Promise((resolve, reject) => {
    let exited = false;
    let closed = false;
    const done = () => exited && closed && resolve();
    const s0 = performance.now();
    start({
      output: () => (first ||= performance.now() - t0),
      exited: () => ((exited = true), done()),
      closed: () => ((closed = true), done()),
      lost: (why) => reject(new Error(why)),
    }).catch(reject);
    sync = performance.now() - s0;
  });
  return { first, total: performance.now() - t0, sync };
}
