// The error of a settings form or control: `wrap` runs an action and keeps its failure
// (`useMutation`), `view` shows it next to the control (an inline alert).
import { InlineError } from '../ErrorBanner';
import { useMutation } from '../../lib/useMutation';

export function useFormError() {
  const { run, error } = useMutation();
  const wrap = (f: () => Promise<unknown>) => run(f);
  const view = <InlineError error={error} />;
  return { wrap, view };
}
