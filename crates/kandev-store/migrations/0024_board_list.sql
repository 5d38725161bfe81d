-- The board list (`task.list`) reads each task's repositories in order: without this
-- covering index every card's lookup read the table rows and sorted them by position in a
-- temporary B-tree of its own (2,000 sorts for a 2,000-task board; issue 15, P3).
CREATE INDEX task_repositories_in_order ON task_repositories(task_id, position, repository_id);
