// Type-level tests of the wire contract (issue 13, acceptance 4). Compiled by `npm run
// typecheck` (`tsc --noEmit`, run by CI), never run or bundled. Each `@ts-expect-error` line
// must be a type error: should the generated types stop catching one, tsc fails with "Unused
// '@ts-expect-error' directive".
import { call } from './client';
import type { Notification } from './types';

export async function wireTypeTests(n: Notification): Promise<void> {
  // A correct call compiles, and its answer has its action's type.
  const { task } = await call('task.get', { id: 't' });
  const title: string = task.title;
  const moved = await call('task.move', { id: 't', step_id: 's', position: 0 });
  const from: string = moved.from_step_id;
  void [title, from];

  // @ts-expect-error: a wrong action name
  await call('task.gett', { id: 't' });
  // @ts-expect-error: a wrong payload field
  await call('task.get', { idd: 't' });
  // @ts-expect-error: an extra payload field
  await call('task.get', { id: 't', force: true });
  // @ts-expect-error: a required field left out
  await call('task.move', { id: 't' });
  // @ts-expect-error: a field of the wrong type
  await call('message.add', { session_id: 's', content: 1 });
  // @ts-expect-error: enums on the wire are unions (`load` or `fresh`)
  await call('session.resume', { id: 's', mode: 'warm' });
  // @ts-expect-error: subscriptions are WebSocket-only
  await call('subscribe', { topics: [] });
  // @ts-expect-error: an answer field that does not exist
  void (await call('workspace.list', {})).workspace;
  // @ts-expect-error: a session state that does not exist
  void (task.state === 'DONE');

  // Notifications narrow by action to their payload.
  if (n.action === 'task.moved') {
    const step: string = n.payload.from_step_id;
    // @ts-expect-error: task.moved carries no message
    void n.payload.message;
    void step;
  }
  // @ts-expect-error: no such notification
  void (n.action === 'task.renamed');
}
