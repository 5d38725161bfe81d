// How a failure is shown: a banner over a page or panel (`ErrorBanner`) or a line next to the
// control that failed (`InlineError`). Both are alerts, say what failed in the server's words,
// and offer Retry when there is something to try again.
import type { ReactNode } from 'react';

interface Props {
  error: ReactNode | null;
  /** Offered as "Retry". */
  onRetry?: (() => void) | undefined;
  /** Offered as "Dismiss". */
  onDismiss?: (() => void) | undefined;
  testId?: string;
  className?: string;
}

export function ErrorBanner({ error, onRetry, onDismiss, testId, className }: Props) {
  if (error === null || error === '') return null;
  return (
    <div className={`banner error ${className ?? ''}`} role="alert" data-testid={testId}>
      {error}
      <Buttons onRetry={onRetry} onDismiss={onDismiss} />
    </div>
  );
}

export function InlineError({ error, onRetry, onDismiss, testId, className }: Props) {
  if (error === null || error === '') return null;
  return (
    <p className={`form-error ${className ?? ''}`} role="alert" data-testid={testId}>
      {error}
      <Buttons onRetry={onRetry} onDismiss={onDismiss} />
    </p>
  );
}

function Buttons({ onRetry, onDismiss }: Pick<Props, 'onRetry' | 'onDismiss'>) {
  return (
    <>
      {onRetry && (
        <button type="button" className="link" onClick={onRetry}>
          Retry
        </button>
      )}
      {onDismiss && (
        <button type="button" className="link" onClick={onDismiss}>
          Dismiss
        </button>
      )}
    </>
  );
}
