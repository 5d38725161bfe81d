// Paging the activity log (`audit.list`, issue 49). The server pages by time: `before` answers
// the entries strictly older than a millisecond, so entries that share the millisecond of a
// page's last one but did not fit on it would never show. The page after `last` is therefore
// asked from that millisecond on (`before` one past it) and the entries already shown are
// dropped; only when a whole page shares that millisecond is it skipped, strictly older.
import type { AuditEntryDto } from '../api/types';

/** `before` for the page after entries whose last was at `lastMs`: from that millisecond on,
 * or strictly before it when `strict` (a whole page shared it). */
export function olderFrom(lastMs: number, strict: boolean): number {
  return strict ? lastMs : lastMs + 1;
}

/** `shown` followed by the entries of `page` not among them. */
export function appendOlder(shown: AuditEntryDto[], page: AuditEntryDto[]): AuditEntryDto[] {
  const ids = new Set(shown.map((e) => e.id));
  return [...shown, ...page.filter((e) => !ids.has(e.id))];
}
