export {
  ClientOptions,
  DeleteItemResponse,
  Highlight,
  HighlightType,
  Item,
  ItemFormat,
  ItemType,
  ItemUpdateReason,
  ItemUpdatesResponse,
  Label,
  LibraryItemState,
  Omnivore,
  PageInfo,
  SaveItemByUrlParameters,
  SaveItemByUrlResponse,
  SearchItemParameters,
  SearchItemResponse,
} from './client'

export { OmnivoreError, OmnivoreErrorCode, isOmnivoreError } from './errors'
