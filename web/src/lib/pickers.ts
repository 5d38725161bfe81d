// The choices of the session's pickers (no React): the modes and config options the agent
// offered, as it sent them (flat or in groups, loosely typed JSON).

export type Choice = { value: string; name: string };

/** The choices of a config option as the agent sent them: flat, or in groups. */
export function choicesOf(options: unknown): Choice[] {
  if (!Array.isArray(options)) return [];
  return options.flatMap((o: unknown): Choice[] => {
    if (!o || typeof o !== 'object') return [];
    const r = o as Record<string, unknown>;
    if (Array.isArray(r.options)) return choicesOf(r.options);
    return typeof r.value === 'string' ? [{ value: r.value, name: typeof r.name === 'string' ? r.name : r.value }] : [];
  });
}
