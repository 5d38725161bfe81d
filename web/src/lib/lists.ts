// Lists of objects with ids, changed by a notification's full object or its id.
import type { Notification, TaskCardDto } from '../api/types';

/** `list` with `item` in place of the element with its id, or appended. */
export function upsertById<T extends { id: string }>(list: T[], item: T): T[] {
  const at = list.findIndex((x) => x.id === item.id);
  if (at === -1) return [...list, item];
  const next = list.slice();
  next[at] = item;
  return next;
}

/** `list` without the element `id` (the same list when it has none). */
export function removeById<T extends { id: string }>(list: T[], id: string): T[] {
  return list.some((x) => x.id === id) ? list.filter((x) => x.id !== id) : list;
}

/** A workspace topic's task notification applied to a list of its tasks: a created, changed,
 * moved or archived task that `keeps` holds is put in place (or appended), one it does not
 * is taken out; a deleted one goes. Other notifications leave the list as it is. */
export function applyTaskEvent(
  list: TaskCardDto[],
  n: Notification,
  keeps: (task: TaskCardDto) => boolean = () => true,
): TaskCardDto[] {
  const { action, payload: p } = n;
  switch (action) {
    case 'task.created':
    case 'task.updated':
    case 'task.moved':
    case 'task.archived':
      // The payload is the whole task, which has every field of a card.
      return keeps(p.task) ? upsertById(list, p.task) : removeById(list, p.task.id);
    case 'task.deleted':
      return removeById(list, p.id);
    default:
      return list;
  }
}
