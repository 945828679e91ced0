"""The pages that draw figures, above the plots they call: docs/findings.md from the first study's record
(``findings``), the one findings page for both studies (``study2``), and the fix run's page (``fix``). Each reads its
record through the study room (``lostmid.study``) and writes nothing before the whole record is checked."""
