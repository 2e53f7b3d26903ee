DROP TABLE flows;
