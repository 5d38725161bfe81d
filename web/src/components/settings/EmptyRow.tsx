// The one row of a settings table that has no rows to show: while its first read is under
// way it says so, after it that there are none. An empty table says neither.
export function EmptyRow({ columns, loading, what, none }: { columns: number; loading: boolean; what: string; none: string }) {
  return (
    <tr>
      <td colSpan={columns} className="hint">
        {loading ? `Reading the ${what}…` : none}
      </td>
    </tr>
  );
}
