// Browser notifications (issue 18): each notification record the server writes (a permission
// request, a finished turn) arrives on the `notifications` topic; while the tab is in the
// background it raises a system notification, and clicking it opens the task. Following the
// topic with replay (useLiveQuery) means records written while the connection was down are
// still announced once it is back. Permission is asked on first use (the header's button).
import { useCallback, useEffect, useState } from 'react';
import type { Notification as Frame, NotificationRecordDto } from '../api/types';
import { navigate, taskPath } from './router';
import { useLiveQuery } from './useLiveQuery';

type Permission = NotificationPermission | 'unsupported';

const supported = () => typeof window !== 'undefined' && 'Notification' in window;

/** Raises the system notification of `record` (when the tab is hidden and it is allowed). */
function raise(record: NotificationRecordDto): void {
  if (!supported() || window.Notification.permission !== 'granted') return;
  if (document.visibilityState !== 'hidden') return; // the page itself shows it
  const body =
    record.kind === 'permission_requested' ? 'The agent is waiting for your answer.' : 'The agent finished its turn.';
  try {
    const shown = new window.Notification(record.title, { body, tag: record.id });
    shown.onclick = () => {
      window.focus();
      navigate(taskPath(record.task_id, record.session_id));
      shown.close();
    };
  } catch {
    // Some browsers allow notifications only from a service worker: the title badge remains.
  }
}

const load = async () => true;
const apply = (data: boolean, n: Frame) => {
  if (n.topic === 'notifications' && n.action === 'notification.created') raise(n.payload.notification);
  return data;
};

/** Follows the `notifications` topic; returns the permission and how to ask for it. */
export function useBrowserNotifications(): { permission: Permission; ask: () => void } {
  useLiveQuery('notifications', load, apply);
  const [permission, setPermission] = useState<Permission>(supported() ? window.Notification.permission : 'unsupported');
  useEffect(() => {
    if (supported()) setPermission(window.Notification.permission);
  }, []);
  const ask = useCallback(() => {
    if (!supported()) return;
    void window.Notification.requestPermission().then(setPermission);
  }, []);
  return { permission, ask };
}
