// The tab's title and icon tell whether something needs the developer (issue 14): a count on
// the board ("(2) Kandev"), "Needs you" on a task's page, and the icon with a dot; records
// that arrived while the tab was in the background add "(N new)" in front (issue 18).
import { useEffect } from 'react';
import { useUnseen } from './notify';

const PLAIN_ICON = '/favicon.svg';
// The same icon with an amber dot in its corner (a data URL: the page's CSP allows `data:`
// images and nothing else from outside).
const ALERT_ICON =
  'data:image/svg+xml,' +
  encodeURIComponent(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#4f46e5"/>' +
      '<rect x="6" y="7" width="5" height="18" rx="2" fill="#fff"/><rect x="13.5" y="7" width="5" height="12" rx="2" fill="#fff" opacity=".85"/>' +
      '<circle cx="25" cy="25" r="7" fill="#f59e0b" stroke="#fff" stroke-width="2"/></svg>',
  );

/** Sets the tab's title (and its icon: with a dot when `alert`) while the page is shown. The
 * title starts with "(N new)" while N notification records arrived in the background. */
export function usePageTitle(title: string, alert: boolean): void {
  const unseen = useUnseen();
  useEffect(() => {
    document.title = unseen > 0 ? `(${unseen} new) ${title}` : title;
    const link = document.querySelector<HTMLLinkElement>('link[rel="icon"]');
    if (link) {
      link.href = alert ? ALERT_ICON : PLAIN_ICON;
      link.dataset.alert = alert ? 'true' : 'false';
    }
  }, [title, alert, unseen]);
  useEffect(
    () => () => {
      document.title = 'Kandev';
      const link = document.querySelector<HTMLLinkElement>('link[rel="icon"]');
      if (link) {
        link.href = PLAIN_ICON;
        link.dataset.alert = 'false';
      }
    },
    [],
  );
}

/** How a reason reads on a card and in a title. */
export const NEEDS_YOU_LABEL: Record<string, string> = {
  permission: 'a permission to answer',
  question: 'a question to answer',
  error: 'the session failed',
  pull_request: 'the pull request’s auto-fix stopped',
};
