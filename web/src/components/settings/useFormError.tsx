// The error of a settings form or control: `wrap` runs an action and keeps its failure, `view`
// shows it next to the control (an inline alert).
import { useState } from 'react';
import { errorText } from '../../api/client';
import { InlineError } from '../ErrorBanner';

export function useFormError() {
  const [error, setError] = useState<string | null>(null);
  const wrap = async (f: () => Promise<unknown>) => {
    setError(null);
    try {
      await f();
      return true;
    } catch (e) {
      setError(errorText(e));
      return false;
    }
  };
  const view = <InlineError error={error} />;
  return { wrap, view };
}
