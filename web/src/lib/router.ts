// A tiny history router: `/` board, `/tasks/<id>`, `/settings`, `/account`. The server
// answers every such path with index.html.
import { useEffect, useState } from 'react';

export type Route =
  | { page: 'board' }
  | { page: 'task'; taskId: string; sessionId: string | null; tab: TaskTab }
  | { page: 'settings'; section: string }
  | { page: 'account' };

/** The tabs of the task page: a session's chat, the Changes, the worktree's files, the
 * terminals and dev servers, the attempts side by side. */
export type TaskTab = 'chat' | 'changes' | 'files' | 'terminal' | 'attempts';

function taskTab(value: string | null): TaskTab {
  return value === 'changes' || value === 'files' || value === 'terminal' || value === 'attempts' ? value : 'chat';
}

export function parseRoute(path: string, search: string): Route {
  const params = new URLSearchParams(search);
  const task = /^\/tasks\/([^/]+)\/?$/.exec(path);
  if (task?.[1]) {
    return {
      page: 'task',
      taskId: decodeURIComponent(task[1]),
      sessionId: params.get('session'),
      tab: taskTab(params.get('tab')),
    };
  }
  const settings = /^\/settings(?:\/([a-z-]+))?\/?$/.exec(path);
  if (settings) return { page: 'settings', section: settings[1] ?? 'profiles' };
  if (/^\/account\/?$/.test(path)) return { page: 'account' };
  return { page: 'board' };
}

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((l) => l());
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname, location.search));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname, location.search));
    listeners.add(update);
    window.addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      window.removeEventListener('popstate', update);
    };
  }, []);
  return route;
}

export function taskPath(taskId: string, sessionId?: string | null, tab?: TaskTab): string {
  const params = new URLSearchParams();
  if (sessionId) params.set('session', sessionId);
  if (tab && tab !== 'chat') params.set('tab', tab);
  const q = params.toString();
  return `/tasks/${encodeURIComponent(taskId)}${q ? `?${q}` : ''}`;
}
