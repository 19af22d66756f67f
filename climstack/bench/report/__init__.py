"""The comparison's report: paired statistics and verdicts, the headline, the report
(Markdown, HTML), its plots and the field's published figures."""
