// Lists of objects with ids, changed by a notification's full object or its id.

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
