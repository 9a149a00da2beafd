"""An entry as a store's item holds it (rdss.repository.entries.Entry.attributes), and back."""

from __future__ import annotations

from rdss.repository.entries import RECEIVED, SENT, Entry


def test_an_entry_reads_back_as_it_was_written() -> None:
    entry = Entry("m", "Document", "MetadataRead", "s", 3, RECEIVED, "responses", "c", "GENERR001", "3.0.2", "4.0.0")
    item = entry.attributes()
    assert item == {
        "messageClass": "Document",
        "messageType": "MetadataRead",
        "sequence": "s",
        "position": 3,
        "status": RECEIVED,
        "returnAddress": "responses",
        "correlationId": "c",
        "errorCode": "GENERR001",
        "translatedFrom": "3.0.2",
        "deliveredAs": "4.0.0",
    }
    assert Entry.from_attributes("m", item) == entry


def test_an_item_written_before_a_field_existed_reads_with_its_default() -> None:
    entry = Entry.from_attributes("m", {"messageType": "MetadataCreate", "status": SENT})
    assert entry == Entry("m", "", "MetadataCreate", "", 1, SENT)
