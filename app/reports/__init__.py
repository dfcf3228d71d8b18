"""Problem reports: a student says what is wrong with a question, part, card or lab; staff answer."""
