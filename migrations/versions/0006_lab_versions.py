"""lab versions: labs synced as content, submissions pinned to a version, worker stops, health probe

Revision ID: 0006_lab_versions
Revises: 0005
Create Date: 2026-11-23 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0006_lab_versions"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "labs",
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("exercise_id", sa.String(length=80), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("retired_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_labs")),
    )
    op.create_table(
        "lab_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("lab_id", sa.String(length=80), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["lab_id"], ["labs.id"], name=op.f("fk_lab_versions_lab_id_labs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_versions")),
        sa.UniqueConstraint("lab_id", "version", name=op.f("uq_lab_versions_lab_id")),
    )
    with op.batch_alter_table("lab_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lab_versions_lab_id"), ["lab_id"], unique=False)
    op.create_table(
        "health_probes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("checked_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_health_probes")),
    )
    with op.batch_alter_table("lab_submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lab_version", sa.Integer(), nullable=True))
    with op.batch_alter_table("lab_workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stopped_at", app.db.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lab_workers", schema=None) as batch_op:
        batch_op.drop_column("stopped_at")
    with op.batch_alter_table("lab_submissions", schema=None) as batch_op:
        batch_op.drop_column("lab_version")
    op.drop_table("health_probes")
    with op.batch_alter_table("lab_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lab_versions_lab_id"))
    op.drop_table("lab_versions")
    op.drop_table("labs")
