"""personal cards: flashcards a student makes from quiz questions no deck card covers, and their reviews

Revision ID: 0010_personal_cards
Revises: 0009_worker_confinement
Create Date: 2026-12-08 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0010_personal_cards"
down_revision: str | Sequence[str] | None = "0009_worker_confinement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "personal_cards",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=80), nullable=True),
        sa.Column("topic", sa.String(length=200), nullable=True),
        sa.Column("front_html", sa.Text(), nullable=False),
        sa.Column("back_html", sa.Text(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
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
        sa.ForeignKeyConstraint(
            ["question_id"], ["questions.id"], name=op.f("fk_personal_cards_question_id_questions")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_personal_cards_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_personal_cards")),
        sa.UniqueConstraint("user_id", "question_id", name="uq_personal_cards_user_id_question_id"),
    )
    with op.batch_alter_table("personal_cards", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_personal_cards_user_id"), ["user_id"], unique=False)

    op.create_table(
        "personal_card_reviews",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column("raw_rating", sa.Integer(), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("reviewed_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("state_before", sa.Integer(), nullable=False),
        sa.Column("version_before", sa.Integer(), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("undone_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["card_id"],
            ["personal_cards.id"],
            name=op.f("fk_personal_card_reviews_card_id_personal_cards"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_personal_card_reviews_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_personal_card_reviews")),
        sa.UniqueConstraint("card_id", "version_before", name="uq_personal_card_reviews_card_id_version_before"),
    )
    with op.batch_alter_table("personal_card_reviews", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_personal_card_reviews_card_id"), ["card_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_personal_card_reviews_reviewed_at"), ["reviewed_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_personal_card_reviews_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_table("personal_card_reviews")
    op.drop_table("personal_cards")
