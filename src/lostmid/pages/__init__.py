"""The pages, above the rows they print and the plots they call: docs/findings.md from the first study's record
(``findings``), the one findings page for both studies (``study2``), the fix run's page (``fix``), and the evidence
table's Markdown with the results page's summary and the README's headline (``evidence``). A study's page reads its
record through the study room (``lostmid.study``) and writes nothing before the whole record is checked."""
