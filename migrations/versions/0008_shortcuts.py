"""shortcuts: a student can turn the study page's one-key shortcuts off

Revision ID: 0008_shortcuts
Revises: 0007_rescores (and needs 0004, the flashcards tables)
Create Date: 2026-11-27 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_shortcuts"
down_revision: str | Sequence[str] | None = "0007_rescores"
branch_labels: str | Sequence[str] | None = None
# The settings table is 0004_flashcards', a branch 0007_rescores does not descend from.
depends_on: str | Sequence[str] | None = "0004"


def upgrade() -> None:
    # Existing students keep the shortcuts they have today.
    op.add_column(
        "flashcard_settings",
        sa.Column("keyboard_shortcuts", sa.Boolean(), server_default=sa.true(), nullable=False),
    )


def downgrade() -> None:
    with op.batch_alter_table("flashcard_settings") as batch:
        batch.drop_column("keyboard_shortcuts")
