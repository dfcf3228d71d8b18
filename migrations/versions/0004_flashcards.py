"""flashcards

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-21 13:05:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0004"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "flashcard_settings",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("desired_retention", sa.Float(), nullable=False),
        sa.Column("new_per_day", sa.Integer(), nullable=False),
        sa.Column("reviews_per_day", sa.Integer(), nullable=False),
        sa.Column("learning_steps", sa.JSON(), nullable=False),
        sa.Column("relearning_steps", sa.JSON(), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_flashcard_settings_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_flashcard_settings")),
    )
    op.create_table(
        "flashcard_states",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.String(length=80), nullable=False),
        sa.Column("deck_id", sa.String(length=80), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("stability", sa.Float(), nullable=True),
        sa.Column("difficulty", sa.Float(), nullable=True),
        sa.Column("due", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_review", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("buried_until", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["card_id"], ["cards.id"], name=op.f("fk_flashcard_states_card_id_cards")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_flashcard_states_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flashcard_states")),
        sa.UniqueConstraint("user_id", "card_id", name="uq_flashcard_states_user_id_card_id"),
    )
    with op.batch_alter_table("flashcard_states", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_flashcard_states_card_id"), ["card_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_flashcard_states_deck_id"), ["deck_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_flashcard_states_user_id"), ["user_id"], unique=False)

    op.create_table(
        "flashcard_reviews",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.String(length=80), nullable=False),
        sa.Column("deck_id", sa.String(length=80), nullable=False),
        sa.Column("review_key", sa.String(length=100), nullable=True),
        sa.Column("raw_rating", sa.Integer(), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("reviewed_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("state_before", sa.Integer(), nullable=False),
        sa.Column("version_before", sa.Integer(), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("undone_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["card_id"], ["cards.id"], name=op.f("fk_flashcard_reviews_card_id_cards")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_flashcard_reviews_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flashcard_reviews")),
        sa.UniqueConstraint(
            "user_id", "card_id", "version_before", name="uq_flashcard_reviews_user_id_card_id_version"
        ),
        sa.UniqueConstraint("user_id", "review_key", name="uq_flashcard_reviews_user_id_review_key"),
    )
    with op.batch_alter_table("flashcard_reviews", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_flashcard_reviews_card_id"), ["card_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_flashcard_reviews_reviewed_at"), ["reviewed_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_flashcard_reviews_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("flashcard_reviews", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flashcard_reviews_user_id"))
        batch_op.drop_index(batch_op.f("ix_flashcard_reviews_reviewed_at"))
        batch_op.drop_index(batch_op.f("ix_flashcard_reviews_card_id"))

    op.drop_table("flashcard_reviews")
    with op.batch_alter_table("flashcard_states", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flashcard_states_user_id"))
        batch_op.drop_index(batch_op.f("ix_flashcard_states_deck_id"))
        batch_op.drop_index(batch_op.f("ix_flashcard_states_card_id"))

    op.drop_table("flashcard_states")
    op.drop_table("flashcard_settings")
