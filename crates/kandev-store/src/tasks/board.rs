//! The board list (`task.list`, `Store::list_tasks`): one statement built from a
//! [`TaskFilter`], read as rows or, for the cards on SQLite, as one JSON value.

use kandev_domain::task::{Task, TaskCard};

use super::{CARD_SELECT, CardRow, TASK_SELECT, TaskFilter, TaskRow, like_pattern};
use crate::sql::{Dialect, QueryBuilder};
use crate::{Result, Store, StoreError};

/// The statement of [`Store::list_tasks`] for `filter`, appended to `q`.
fn push_list(q: &mut QueryBuilder, filter: &TaskFilter) {
    push_board(q, TASK_SELECT, filter);
}

/// The statement of [`Store::list_cards`] for `filter` (as rows), appended to `q`.
fn push_cards(q: &mut QueryBuilder, filter: &TaskFilter) {
    push_board(q, CARD_SELECT, filter);
}

/// `select` over the tasks `filter` matches, in board order, with its page.
fn push_board(q: &mut QueryBuilder, select: &str, filter: &TaskFilter) {
    push_board_filter(q, select, filter);
    q.push(" ORDER BY ").push(BOARD_ORDER);
    q.push(" LIMIT ").push_bind(filter.limit).push(" OFFSET ").push_bind(filter.offset);
}

/// [`push_board`] without its order and page: every card the filter matches, in no order.
fn push_board_filter(q: &mut QueryBuilder, select: &str, filter: &TaskFilter) {
    q.push(select).push(" JOIN workflow_steps s ON s.id = t.step_id WHERE 1 = 1");
    if let Some(id) = &filter.workflow_id {
        q.push(" AND t.workflow_id = ").push_bind(id.as_str());
    }
    if let Some(id) = &filter.step_id {
        q.push(" AND t.step_id = ").push_bind(id.as_str());
    }
    if let Some(text) = &filter.query {
        let pattern = like_pattern(text);
        q.push(" AND (t.title LIKE ").push_bind(pattern.as_str()).push(" ESCAPE '\\'");
        q.push(" OR t.description LIKE ").push_bind(pattern).push(" ESCAPE '\\')");
    }
    if !filter.include_archived {
        q.push(" AND t.archived_at IS NULL");
    }
}

/// The order of a board: by step, then position in the step.
const BOARD_ORDER: &str = "s.position, t.position, t.created_at, t.id";

/// [`push_cards`] as one row of one value on SQLite: a JSON array with one `[step position,
/// created_at, card]` triple per card, `card` an array of [`CardRow`]'s fields in its order.
/// sqlx copies every value of every row it hands over, one allocation each on the
/// connection's thread, freed on the async workers: for a 2,000-card board those 26,000
/// copies, and the allocator's locks they contended on, were two thirds of `task.list`'s
/// CPU (docs/performance.md). The statement neither orders nor pages: the
/// reader puts the cards in board order from the triples and takes the page
/// ([`cards_from_json`]). An aggregate's input order is not SQLite's promise anyway, and
/// SQLite's sort of the wide card rows was a third of the statement.
/// With `LIMIT` SQLite still built every matching card before sorting (its sorter holds
/// whole rows); without it every matching card is also written as JSON and parsed, so a
/// small page of a large filter costs a little more than it did, and a whole board less.
fn push_cards_json(q: &mut QueryBuilder, filter: &TaskFilter) {
    q.push(
        "SELECT json_group_array(json_array(step_position, created_at, json_array(id, \
         workflow_id, step_id, title, state, needs_you, position, primary_session_id, \
         archived_at, parent_id, blocked_by, repository_ids, git))) FROM (",
    );
    // The card's columns with the two the reader sorts by in front.
    q.push("SELECT s.position AS step_position, t.created_at AS created_at, ");
    push_board_filter(q, CARD_SELECT.trim_start_matches("SELECT "), filter);
    q.push(")");
}

/// The page `filter` asks for of a [`push_cards_json`] answer, in board order
/// ([`BOARD_ORDER`]: step, position, creation, id; ids compare bytewise in both, as SQLite's
/// `BINARY` collation does).
fn cards_from_json(text: &str, filter: &TaskFilter) -> Result<Vec<CardRow>> {
    let mut keyed: Vec<(i64, i64, CardRow)> =
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("board cards: {e}")))?;
    keyed.sort_unstable_by(|(step_a, created_a, a), (step_b, created_b, b)| {
        (step_a, a.position, created_a, &a.id).cmp(&(step_b, b.position, created_b, &b.id))
    });
    // Negative bounds are refused by the API; here they read as SQLite reads them (a
    // negative limit is no limit, a negative offset none).
    let offset = usize::try_from(filter.offset).unwrap_or(0);
    let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    Ok(keyed.into_iter().skip(offset).take(limit).map(|(_, _, row)| row).collect())
}

impl Store {
    /// Tasks in board order; see [`TaskFilter`].
    pub async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let mut q = QueryBuilder::new(self.dialect(), "");
        push_list(&mut q, filter);
        let rows: Vec<TaskRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(Task::try_from).collect()
    }

    /// [`Store::list_tasks`] as board cards (`task.list`): only what a card shows is read.
    /// On SQLite the cards come as one JSON value ([`push_cards_json`]); PostgreSQL's rows
    /// are decoded from its wire format without that per-value copy, and stay rows.
    pub async fn list_cards(&self, filter: &TaskFilter) -> Result<Vec<TaskCard>> {
        let rows = match self.dialect() {
            Dialect::Sqlite => {
                let mut q = QueryBuilder::new(Dialect::Sqlite, "");
                push_cards_json(&mut q, filter);
                let json: Option<String> =
                    q.build_query_scalar().fetch_optional(&self.read).await?;
                cards_from_json(json.as_deref().unwrap_or("[]"), filter)?
            }
            Dialect::Postgres => return self.list_cards_by_rows(filter).await,
        };
        rows.into_iter().map(TaskCard::try_from).collect()
    }

    /// [`Store::list_cards`] read as one row per card on every engine: PostgreSQL's read, and
    /// what the SQLite read must equal
    /// (`i15_a4_the_board_read_as_one_value_equals_the_board_read_row_by_row`).
    #[doc(hidden)]
    pub async fn list_cards_by_rows(&self, filter: &TaskFilter) -> Result<Vec<TaskCard>> {
        let mut q = QueryBuilder::new(self.dialect(), "");
        push_cards(&mut q, filter);
        let rows: Vec<CardRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(TaskCard::try_from).collect()
    }
}

#[cfg(test)]
mod tests {
    use kandev_domain::WorkflowId;

    use super::{BOARD_ORDER, TaskFilter, like_pattern, push_cards, push_cards_json, push_list};
    use crate::Store;
    use crate::sql::{Dialect, QueryBuilder};

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }

    /// A board of workflow `w`, as the board reads ask for it.
    fn board_w() -> TaskFilter {
        TaskFilter { workflow_id: Some(WorkflowId::new("w")), limit: 2000, ..TaskFilter::default() }
    }

    /// A board statement for [`board_w`] on SQLite, as the store builds and binds it.
    fn board_statement(push: fn(&mut QueryBuilder, &TaskFilter)) -> QueryBuilder {
        let mut q = QueryBuilder::new(Dialect::Sqlite, "");
        push(&mut q, &board_w());
        q
    }

    /// SQLite's plan of a board statement for [`board_w`], bound as the store binds it.
    async fn plan_of(store: &Store, push: fn(&mut QueryBuilder, &TaskFilter)) -> String {
        let mut q = QueryBuilder::new(Dialect::Sqlite, "EXPLAIN QUERY PLAN ");
        push(&mut q, &board_w());
        let rows: Vec<(i64, i64, i64, String)> =
            q.build_query_as().fetch_all(&store.read).await.unwrap();
        rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
    }

    #[tokio::test]
    async fn i15_a4_the_board_list_reads_repositories_in_order_from_their_covering_index() {
        let store = Store::in_memory().await.unwrap();
        let plan = plan_of(&store, push_list).await;
        assert!(plan.contains("COVERING INDEX task_repositories_in_order"), "{plan}");
        assert!(plan.contains("tasks_by_board"), "{plan}");
        // One sort for the whole board (by step position), none per task.
        assert_eq!(plan.matches("TEMP B-TREE").count(), 1, "{plan}");
    }

    /// Issue 15 (P3): `task.list` reads the cards with the board list's plan (one index
    /// search of the board, the covering index per card, one sort) and none of the columns a
    /// card does not show.
    #[tokio::test]
    async fn i15_a4_the_card_list_has_the_board_lists_plan_and_reads_no_description() {
        let store = Store::in_memory().await.unwrap();
        let cards = plan_of(&store, push_cards).await;
        // A whole task also reads its origin (issue 47), by the origins' task index; a card
        // does not show it.
        let list = plan_of(&store, push_list).await;
        assert!(list.contains("SEARCH task_origins USING INDEX task_origins_task"), "{list}");
        let lines: Vec<&str> = list.lines().collect();
        let without_origin: Vec<&str> = lines
            .iter()
            .enumerate()
            .filter(|(i, line)| {
                let origin = |l: Option<&&str>| l.is_some_and(|l| l.contains("task_origins"));
                let subquery_of_origin = line.starts_with("CORRELATED") && origin(lines.get(i + 1));
                !(line.contains("task_origins") || subquery_of_origin)
            })
            .map(|(_, line)| *line)
            .collect();
        assert_eq!(cards, without_origin.join("\n"), "the same plan");
        let statement = board_statement(push_cards);
        let select = statement.sql();
        let columns = &select[..select.find(" FROM tasks t").unwrap()];
        for unread in
            ["description", "agent_profile_id", "workspace_id", "created_at", "updated_at"]
        {
            assert!(!columns.contains(unread), "{unread} is not read: {columns}");
        }
    }

    /// Issue 15 (P3): on SQLite `task.list` reads the cards as one JSON
    /// value with the same searches and no sort at all: the store orders and pages them.
    #[tokio::test]
    async fn i15_a4_the_sqlite_card_read_leaves_the_sort_to_the_store() {
        let store = Store::in_memory().await.unwrap();
        let statement = board_statement(push_cards_json);
        let sql = statement.sql();
        assert!(!sql.contains("LIMIT") && !sql.contains(BOARD_ORDER), "{sql}");
        let plan = plan_of(&store, push_cards_json).await;
        assert!(plan.contains("tasks_by_board"), "{plan}");
        assert!(plan.contains("COVERING INDEX task_repositories_in_order"), "{plan}");
        assert_eq!(plan.matches("TEMP B-TREE").count(), 0, "{plan}");
    }
}
