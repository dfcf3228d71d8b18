"""exercise give-ups: "Show the answer" is recorded as giving up on the part (given_up_at)

The column that recorded a shown solution (revealed_at) already meant exactly that: the part was
opened without being solved. It is renamed, keeping every student's record.

Revision ID: 0010_exercise_giveups
Revises: 0009_worker_confinement
Create Date: 2026-12-02 09:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_exercise_giveups"
down_revision: str | Sequence[str] | None = "0009_worker_confinement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("exercise_part_progress", schema=None) as batch_op:
        batch_op.alter_column("revealed_at", new_column_name="given_up_at")


def downgrade() -> None:
    with op.batch_alter_table("exercise_part_progress", schema=None) as batch_op:
        batch_op.alter_column("given_up_at", new_column_name="revealed_at")
